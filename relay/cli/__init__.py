"""The ``dfos-relay`` console command: one module per subcommand, parsed and
dispatched by ``relay.cli.main``."""

from relay.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
