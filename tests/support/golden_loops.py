"""Scalar-loop references of the golden forward's attention and gated delta net (independent of numpy broadcasting)."""

from __future__ import annotations

import math

import numpy as np


def sig(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


def loop_attention(x, w, nh, nkv, hd, rot, theta, eps, zero_centred, gated):
    t_len, hidden = len(x), len(x[0])

    def proj(m, t, row):
        return sum(x[t][i] * m[row][i] for i in range(hidden))

    def norm(vec, weight):
        r = math.sqrt(sum(e * e for e in vec) / len(vec) + eps)
        return [vec[d] / r * ((1 + weight[d]) if zero_centred else weight[d]) for d in range(len(vec))]

    def rotate(vec, pos):
        out = list(vec)
        for i in range(rot // 2):
            ang = pos * theta ** (-2 * i / rot)
            a, b = vec[i], vec[i + rot // 2]
            out[i], out[i + rot // 2] = a * math.cos(ang) - b * math.sin(ang), b * math.cos(ang) + a * math.sin(ang)
        return out

    q = [[rotate(norm([proj(w["query"], t, h * hd + d) for d in range(hd)], w["query_norm"]), t) for h in range(nh)]
         for t in range(t_len)]
    k = [[rotate(norm([proj(w["key"], t, h * hd + d) for d in range(hd)], w["key_norm"]), t) for h in range(nkv)]
         for t in range(t_len)]
    v = [[[proj(w["value"], t, h * hd + d) for d in range(hd)] for h in range(nkv)] for t in range(t_len)]
    y = []
    for t in range(t_len):
        cat = []
        for h in range(nh):
            kvh = h // (nh // nkv)
            scores = [sum(q[t][h][d] * k[s][kvh][d] for d in range(hd)) / math.sqrt(hd) for s in range(t + 1)]
            top = max(scores)
            p = [math.exp(sc - top) for sc in scores]
            p = [e / sum(p) for e in p]
            cat += [sum(p[s] * v[s][kvh][d] for s in range(t + 1)) for d in range(hd)]
        if gated:
            cat = [cat[j] * sig(proj(w["gate"], t, j)) for j in range(nh * hd)]
        y.append([sum(cat[j] * w["output"][o][j] for j in range(nh * hd)) for o in range(len(w["output"]))])
    return np.array(y)


def loop_gdn(x, w, hk, hv, dk, dv, kernel, eps):
    t_len, hidden = len(x), len(x[0])

    def silu(e):
        return e * sig(e)

    weights = w["query"] + w["key"] + w["value"]
    pre = [[sum(x[t][i] * weights[c][i] for i in range(hidden)) for c in range(len(weights))] for t in range(t_len)]
    conv = [[silu(sum(w["conv1d"][c][j] * pre[t - kernel + 1 + j][c] for j in range(kernel) if t - kernel + 1 + j >= 0))
             for c in range(len(weights))] for t in range(t_len)]
    state = [[[0.0] * dv for _ in range(dk)] for _ in range(hv)]
    out = []
    for t in range(t_len):
        row = []
        for j in range(hv):
            kk = j // (hv // hk)
            qv = conv[t][kk * dk : kk * dk + dk]
            kv = conv[t][hk * dk + kk * dk : hk * dk + kk * dk + dk]
            vv = conv[t][2 * hk * dk + j * dv : 2 * hk * dk + j * dv + dv]
            qn = [e / math.sqrt(sum(f * f for f in qv) + 1e-6) / math.sqrt(dk) for e in qv]
            kn = [e / math.sqrt(sum(f * f for f in kv) + 1e-6) for e in kv]
            a = sum(x[t][i] * w["a"][j][i] for i in range(hidden)) + w["dt_bias"][j]
            g = -math.exp(w["a_log"][j]) * math.log1p(math.exp(a))
            beta = sig(sum(x[t][i] * w["b"][j][i] for i in range(hidden)))
            s = [[state[j][i][e] * math.exp(g) for e in range(dv)] for i in range(dk)]
            delta = [beta * (vv[e] - sum(s[i][e] * kn[i] for i in range(dk))) for e in range(dv)]
            s = [[s[i][e] + kn[i] * delta[e] for e in range(dv)] for i in range(dk)]
            state[j] = s
            core = [sum(s[i][e] * qn[i] for i in range(dk)) for e in range(dv)]
            r = math.sqrt(sum(c * c for c in core) / dv + eps)
            z = [sum(x[t][i] * w["z"][j * dv + e][i] for i in range(hidden)) for e in range(dv)]
            row += [w["norm"][e] * core[e] / r * silu(z[e]) for e in range(dv)]
        out.append([sum(row[c] * w["output"][o][c] for c in range(hv * dv)) for o in range(len(w["output"]))])
    return np.array(out)
