"""The user's tree: finding source files and writing them back atomically."""
