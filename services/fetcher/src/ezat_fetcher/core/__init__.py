"""Pure decisions of the fetcher: which addresses are public, which URLs and bytes are accepted.

No I/O, no clock, no logging; the adapter in ``download.py`` passes everything in.
"""
