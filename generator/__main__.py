"""Allow `python -m generator`."""

from generator.cli import main

if __name__ == "__main__":
    main()
