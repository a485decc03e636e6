"""EZAT fetcher: downloads untrusted http(s) URLs of content parts, sandboxed (docs/api.md,
"Images and PDFs"; deploy/k8s/README.md).

It is the only service that talks to arbitrary hosts: it connects to public addresses only,
checks every redirect hop, limits size and time, and decides the media type from the bytes.
"""
