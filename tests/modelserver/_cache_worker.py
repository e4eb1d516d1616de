"""One process of the shared-cache test: Django set up from the environment, one chat call, its outcome printed.

python -m tests.modelserver._cache_worker BASE_URL CACHE_DIR QUESTION
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import django


def main() -> None:
    base_url, cache_dir, question = sys.argv[1:4]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    django.setup()
    from generation.settings import configure_model_servers
    from modelserver import ChatClient, ChatConfig

    configure_model_servers()
    # Each process names a folder of its own, as on another host: the shared cache does not use it.
    client = ChatClient(ChatConfig(base_url=base_url, model="standin-model", max_retries=0), cache_dir=Path(cache_dir))
    result = client.complete([{"role": "user", "content": question}])
    print(json.dumps({"text": result.text, "cached": result.cached}))


if __name__ == "__main__":
    main()
