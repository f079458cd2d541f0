"""The fits: the laws, Chinchilla approaches 1-3, bootstrap, validation, results and allocation."""
