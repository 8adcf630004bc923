"""The resources' strategies: defaulting, validation, admission, subresources and the
controllers the server runs (above ``apiserver.machinery``)."""
