"""fastprof.pytest_plugin (being written)."""

