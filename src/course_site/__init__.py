"""What builds the course rather than teaches it: the static site (`make site`, `make
site-student`), made by Sphinx, MyST-NB and sphinx-book-theme from the notebooks that `make
test` or `make site` already executed; and the table of notebook times that ends `make test`."""
