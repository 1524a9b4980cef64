"""``python -m rdmadoctor.fixturegen``: the generator's command line (see the package docstring)."""

from rdmadoctor.fixturegen import main

raise SystemExit(main())
