// placeholder, replaced in this change
