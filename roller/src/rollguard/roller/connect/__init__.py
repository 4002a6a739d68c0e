"""Kafka Connect operations: status, restarts on every worker version, stop and resume with
`--wait`, auto-restart with backoff, connector and MirrorMaker 2 offsets with nothing half done.

`cli` and `commands` are the command line; `options` its typed options; `client` the REST
client (the one boundary where HTTP and JSON errors become `ConnectError`); `operations`,
`offsets` and `autorestart` the work; `policy`, `shapes` and `versions` pure decisions.
"""
