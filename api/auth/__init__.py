"""Authentication: OpenID Connect bearer tokens verified locally and mapped to principals."""
