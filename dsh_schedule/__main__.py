"""``python -m dsh_schedule``: the ``dsh-schedule`` command."""

from dsh_schedule.cli import main

if __name__ == "__main__":
    main()
