"""fastprof.nvtx (being written)."""

