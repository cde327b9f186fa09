from gramdist.cli import entry_point

entry_point()
