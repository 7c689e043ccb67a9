"""Track stock levels per SKU."""
