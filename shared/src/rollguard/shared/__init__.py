"""Code that every rollguard component needs: broker states, wire models, TLS contexts.

`shared` is the bottom layer: it imports none of `agent`, `roller`, `certs` or `spark`.
"""
