"""The implementations people use, wrapped to the kit's contracts: one module per library, so
that the worker imports a library only when its row runs. Each function is what a user of that
library would write; the wrapping only reshapes arguments, never checks or fixes them."""
