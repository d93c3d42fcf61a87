"""`icelog dev-idp`: a local OpenID provider for trying authentication (docs/auth.md).

Development only: anyone who reaches it can sign in as anyone. It is the same provider the
test suite runs (tests/support/idp.py wraps it), shipped in the package so that it works
from an installed wheel as well as from a checkout.

- `provider.py`: keys, tokens and the OAuth2 grants (client credentials, token exchange,
  authorization code with PKCE);
- `server.py`: the HTTP endpoints (discovery, JWKS, token, the login page);
- `command.py`: the command line (users, client credentials, what to export).
"""
