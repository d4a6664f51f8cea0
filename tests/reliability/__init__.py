"""The reliability suite (issue 6): a package, so its shared server is torn down when the package's tests end."""
