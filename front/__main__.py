"""``python3 -m front``, or ``python3 <dir>`` where ``<dir>`` holds this file beside the package (the
pods' way: components/render/proxy.py mounts it so, and Python puts ``<dir>`` first on the path)."""

from front.serve import main

main()
