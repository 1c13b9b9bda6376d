"""The benchmark suite (`make bench`): each module measures one area side by side with a peer."""
