"""fastprof.cli (being written)."""

def main(*args, **kwargs):  # placeholder until this module lands
    raise NotImplementedError("fastprof.cli.main is not built yet")

