
we