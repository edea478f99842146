"""fastprof.profile (being written)."""

def Profile(*args, **kwargs):  # placeholder until this module lands
    raise NotImplementedError("fastprof.profile.Profile is not built yet")

def run(*args, **kwargs):  # placeholder until this module lands
    raise NotImplementedError("fastprof.profile.run is not built yet")

def runctx(*args, **kwargs):  # placeholder until this module lands
    raise NotImplementedError("fastprof.profile.runctx is not built yet")

def profile(*args, **kwargs):  # placeholder until this module lands
    raise NotImplementedError("fastprof.profile.profile is not built yet")

