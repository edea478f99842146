"""fastprof.kernels (being written)."""

