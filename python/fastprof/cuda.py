"""fastprof.cuda (being written)."""

def cuda_timer(*args, **kwargs):  # placeholder until this module lands
    raise NotImplementedError("fastprof.cuda.cuda_timer is not built yet")

def cuda_trace(*args, **kwargs):  # placeholder until this module lands
    raise NotImplementedError("fastprof.cuda.cuda_trace is not built yet")

