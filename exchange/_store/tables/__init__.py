"""The tables of the store and the migrations that create and change them."""
