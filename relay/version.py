"""The one place the relay's versions live."""

RELAY_VERSION = "0.1.0"
PROTOCOL_NAME = "dfos-web-relay"
DFOS_PROTOCOL_VERSION = "0.7.1"
