"""What the gateways of one store share: their node records and the node lock, gateway settings, the plant's
state and recorded file changes."""
