"""The evidence library's pages: the public section and the parties' publishing forms."""
