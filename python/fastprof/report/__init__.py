"""Report writers: text tables (``report.text``); callgrind and speedscope exports."""
