"""Read what a job printed and say why it failed or ran slowly (see rdmadoctor.logs.scan)."""
