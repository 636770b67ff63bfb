import no_such_module_anywhere  # noqa: F401

graph = None
