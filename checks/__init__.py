"""Built-in checks, one module per family. Installed as ``rdmadoctor.checks``."""
