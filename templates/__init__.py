"""The built-in jinja2 templates of the status comment (packaged as bot.templates)."""
