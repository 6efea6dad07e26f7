"""A failed model call: classify the error, then retry, rotate a credential, compress or fall
back."""
