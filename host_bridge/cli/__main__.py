"""``python -m host_bridge.cli``: the ``dsh-schedule`` command."""

from host_bridge.cli import main

if __name__ == "__main__":
    main()
