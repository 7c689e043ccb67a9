# Present so pytest adds the repository root to sys.path, making `import src`
# resolve from the test suite.
