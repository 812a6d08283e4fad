"""The built-in machine descriptions (``orrery machine list``), one TOML file each."""
