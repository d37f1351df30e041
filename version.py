"""fusec's version, in a module of its own: the layers read it here (the CLI's
`--version`, the tuning caches' keys) rather than from the package `fusec`,
whose attributes import the layers above them (`fusec.compile`, `fusec.torch`)."""

__version__ = "0.1.0"
