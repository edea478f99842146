"""fastprof.stats (being written)."""

def Stats(*args, **kwargs):  # placeholder until this module lands
    raise NotImplementedError("fastprof.stats.Stats is not built yet")

