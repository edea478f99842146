"""Report writers: text tables, HTML, callgrind, speedscope, Chrome trace."""
