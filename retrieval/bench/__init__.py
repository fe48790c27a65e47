"""`python -m retrieval bench`: synthetic knowledge bases and what each cost of a lookup, the app, the server and a
cluster comes to.
"""
