"""Local work and management commands on a fresh clone: DEBUG on, a throwaway key, no HTTPS-only cookies.

`manage.py` and `bin/demo` use these by default, so nothing has to be set to try the platform.
"""

from config.settings.base import *  # noqa: F403
from config.settings.base import env

DEBUG = env.bool("DEBUG", default=True)
SECRET_KEY = env.str("SECRET_KEY", default="insecure-local-key-only-for-this-machine-0123456789")
