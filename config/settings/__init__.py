"""Settings by environment: `base` is shared; `local`, `production` and `test` each build on it."""
