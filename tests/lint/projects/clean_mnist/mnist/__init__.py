"""A correct MNIST package: the same hops as the other sample projects, used right."""
