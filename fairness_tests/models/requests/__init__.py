"""What is asked of a model and how its answers are read: :class:`~.request.Request` and
:class:`~.request.Response`, request kinds, prompt formats, repeat modes, the answer
parser, letter distributions. The lowest floor of ``models``: imports no other part of it."""
