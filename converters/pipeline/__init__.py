"""The conversion pipeline: ``plan`` (every object before any byte is read), ``expert_bank``, ``template``,
``proposal``, ``produce`` (the bytes, row block by row block) and ``convert`` (the library function behind
``gguf2ninfer`` / ``st2ninfer``)."""
