import sys

if sys.argv[1:2] == ["serve"]:  # the MCP server starts without the rest of the CLI (retrieval/cli/serve.py)
    from retrieval.cli.serve import main as serve_main

    serve_main(sys.argv[2:])
else:
    from retrieval.cli import main

    main()
